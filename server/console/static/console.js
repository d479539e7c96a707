// commandbus console: live updates. Every page renders complete without this file. On a page
// whose <main> names a data-live-url, it asks that URL every few seconds for the page's live
// regions (rendered on the server by the same templates) and swaps them in, leaving alone a
// region that holds the keyboard focus and pausing while the tab is hidden.
(function () {
  'use strict';
  // A "tick every item" box above a queue's list; without JavaScript it stays hidden and the
  // operator ticks items one by one or chooses "all listed here".
  document.querySelectorAll('input[data-select-all]').forEach(function (all) {
    var name = all.getAttribute('data-select-all');
    var boxes = function () { return document.querySelectorAll('input[type=checkbox][name="' + name + '"]'); };
    all.hidden = false;
    all.addEventListener('change', function () {
      boxes().forEach(function (b) { b.checked = all.checked; });
    });
  });
})();

(function () {
  'use strict';
  var main = document.getElementById('main');
  if (!main || !window.fetch) { return; }
  var url = main.getAttribute('data-live-url');
  if (!url) { return; }
  var interval = parseInt(main.getAttribute('data-live-interval'), 10) || 3000;
  var status = document.getElementById('live-status');
  var failures = 0;

  function say(text) { if (status) { status.textContent = text; } }

  function apply(data) {
    var regions = (data && data.regions) || {};
    Object.keys(regions).forEach(function (id) {
      var el = document.getElementById(id);
      if (!el || el.contains(document.activeElement)) { return; }
      // Keep open <details> open across the swap.
      var open = {};
      el.querySelectorAll('details[open] > summary').forEach(function (s, i) { open[i] = true; });
      el.innerHTML = regions[id];
      el.querySelectorAll('details > summary').forEach(function (s, i) { if (open[i]) { s.parentNode.open = true; } });
    });
    // In UTC, as every time on the console.
    say('Live: updated at ' + new Date().toISOString().slice(11, 19) + ' UTC.');
  }

  function tick() {
    if (document.hidden) { setTimeout(tick, interval); return; }
    fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } })
      .then(function (r) {
        if (r.status === 401) { throw new Error('signed out'); }
        if (!r.ok) { throw new Error('HTTP ' + r.status); }
        return r.json();
      })
      .then(function (data) { failures = 0; apply(data); setTimeout(tick, interval); })
      .catch(function (err) {
        failures++;
        if (String(err.message) === 'signed out') {
          say('Live updates stopped: your session ended. Sign in again.');
          return;
        }
        say('Live updates paused (' + err.message + '); retrying.');
        setTimeout(tick, Math.min(interval * Math.pow(2, failures), 60000));
      });
  }

  say('Live: updates every ' + Math.round(interval / 1000) + ' seconds.');
  setTimeout(tick, interval);
})();
