package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Every operator action goes through one flow: a GET shows a confirmation page that says what
// the action does, to what, and asks for a reason; its POST (with the session's CSRF token) runs
// the action audited with the session's subject and redirects back with a flash message. Invalid
// input re-renders the page with each error next to its field.

// FormField is one input of a confirmation form besides the reason.
type FormField struct {
	Name        string
	Label       string
	Hint        string
	Kind        string // "text", "textarea" or "hidden"
	Value       string
	Placeholder string
	Required    bool
}

// Fact is one line of what an action applies to, linked to Href when set.
type Fact struct {
	Label string
	Value string
	Href  string
}

// ActionPage describes one operator action on one item for the confirmation flow (Act): what
// it does, to what, the fields it asks for besides the reason, and Run, which does it.
type ActionPage struct {
	Nav         string
	Title       string
	Description string
	Submit      string
	Danger      bool
	Facts       []Fact
	Fields      []FormField
	// Unavailable, when set, says why the action cannot apply now; no form is shown.
	Unavailable string
	// Return is where the operator goes back to, and lands after the action.
	Return string
	// Done is the flash message after the action succeeded.
	Done string
	// Run takes the action as op (the signed-in subject and the reason given) with the posted
	// form; a *commandbus.ValidationError is shown next to its field.
	Run func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error
}

// fieldError is an error shown next to its field and listed in the summary above the form.
type fieldError struct {
	Field   string
	Message string
}

type confirmData struct {
	*ActionPage
	Action    string
	Reason    string
	Errors    map[string]string
	Summary   []fieldError
	FormError string
}

func (d *confirmData) addError(field, message string) {
	if _, dup := d.Errors[field]; !dup {
		d.Errors[field] = message
		d.Summary = append(d.Summary, fieldError{Field: field, Message: message})
	}
}

// returnTo is the page to go back to: the form's or the link's "return", if it is a console
// path, else fallback.
func returnTo(r *http.Request, fallback string) string {
	v := r.URL.Query().Get("return")
	if r.Method == http.MethodPost {
		v = r.PostFormValue("return")
	}
	return localPath(v, fallback)
}

// act runs the confirmation flow of spec.
func (c *Console) act(w http.ResponseWriter, r *http.Request, spec *ActionPage) {
	data := &confirmData{ActionPage: spec, Action: r.URL.Path, Errors: map[string]string{}}
	if r.Method != http.MethodPost {
		c.renderConfirm(w, r, http.StatusOK, data)
		return
	}
	if spec.Unavailable != "" {
		c.renderConfirm(w, r, http.StatusConflict, data)
		return
	}
	form := r.PostForm
	data.Reason = strings.TrimSpace(form.Get("reason"))
	for i := range spec.Fields {
		spec.Fields[i].Value = form.Get(spec.Fields[i].Name)
	}
	if data.Reason == "" {
		data.addError("reason", "Say why you take this action: it is recorded in the audit log.")
	} else if msg := reasonProblem(data.Reason); msg != "" {
		data.addError("reason", msg)
	}
	for _, f := range spec.Fields {
		if f.Required && strings.TrimSpace(f.Value) == "" {
			data.addError(f.Name, f.Label+" is required.")
		}
	}
	if len(data.Errors) > 0 {
		c.renderConfirm(w, r, http.StatusUnprocessableEntity, data)
		return
	}
	err := spec.Run(r.Context(), commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: data.Reason}, form)
	if err == nil {
		c.redirectWith(w, r, spec.Return, "success", spec.Done)
		return
	}
	c.renderConfirm(w, r, c.actionError(r, err, data), data)
}

// actionError puts an action's error on the form and returns the status to answer with.
func (c *Console) actionError(r *http.Request, err error, data *confirmData) int {
	known := map[string]bool{"reason": true}
	for _, f := range data.Fields {
		known[f.Name] = true
	}
	fields := 0
	for _, e := range httpx.Flatten(err) {
		var v *commandbus.ValidationError
		if !errors.As(e, &v) {
			continue
		}
		fields++
		name, _, _ := strings.Cut(v.Field, ".")
		if known[name] {
			data.addError(name, v.Message)
		} else {
			data.FormError = strings.TrimSpace(data.FormError + " " + v.Field + ": " + v.Message)
		}
	}
	switch {
	case fields > 0:
		return http.StatusUnprocessableEntity
	case errors.Is(err, process.ErrBusy):
		data.FormError = "A runner is working on this right now. Wait a moment and submit again."
		return http.StatusConflict
	case errors.Is(err, errNotApplied):
		c.logger.Error("console: an action was accepted but did not take effect", "path", r.URL.Path, "actor", httpx.Subject(r), "error", err)
		data.FormError = "The action did not take effect: " + strings.TrimPrefix(err.Error(), errNotApplied.Error()+": ") +
			". Look at the process's log before trying again."
		return http.StatusConflict
	case errors.Is(err, process.ErrCompensationFailed):
		data.FormError = "The compensations ran, but not all succeeded: " + err.Error() +
			". The process waits in the troubleshooting queue with COMPENSATION_FAILED: retry the failed compensations there, or skip them once undone by hand."
		return http.StatusConflict
	case errors.Is(err, commandbus.ErrInvalidState):
		data.FormError = "This action no longer applies: " + err.Error() + ". Someone may have handled it already; go back to the list."
		return http.StatusConflict
	case errors.Is(err, commandbus.ErrNotFound):
		data.FormError = "Not found: " + err.Error()
		return http.StatusNotFound
	}
	// The cause stays in the log (database errors name tables and constraints).
	id := httpx.LogID(r.Context())
	c.logger.Error("console: action failed", "request_id", id, "path", r.URL.Path, "actor", httpx.Subject(r), "error", err)
	data.FormError = "The action failed. The cause was logged with request id " + id + "."
	return http.StatusInternalServerError
}

func (c *Console) renderConfirm(w http.ResponseWriter, r *http.Request, status int, data *confirmData) {
	p := c.newPage(w, r, data.Title, data.Nav)
	p.Data = data
	c.render(w, r, status, "confirm.html", p)
}

// errNotApplied says an action the engine accepted did not leave the state it promises: the
// console reports it as a failure, never as done.
var errNotApplied = errors.New("the action did not take effect")

// checkCancelled reads a process back after a cancellation: it must be CANCELLED, or
// COMPENSATING on its way there.
func (c *Console) checkCancelled(ctx context.Context, id uuid.UUID) error {
	row, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
	if err != nil {
		return err
	}
	switch row.Status {
	case driver.ExecutionCancelled, driver.ExecutionCompensating:
		return nil
	}
	why := ""
	if row.ErrorCode != "" {
		why = " (" + row.ErrorCode + ": " + row.ErrorMessage + ")"
	}
	return fmt.Errorf("%w: process %s is still %s after the cancellation%s", errNotApplied, id, row.Status, why)
}

// jsonField reads an optional JSON form field.
func jsonField(form url.Values, name string) (json.RawMessage, error) {
	v := strings.TrimSpace(form.Get(name))
	if v == "" {
		return nil, nil
	}
	if !json.Valid([]byte(v)) {
		return nil, &commandbus.ValidationError{Field: name, Message: "This is not valid JSON. Check quotes, commas and brackets."}
	}
	return json.RawMessage(v), nil
}

// whileBusy retries an action for a few seconds while a runner holds the execution: a poller or
// a response may be working on it for a moment.
func whileBusy(ctx context.Context, action func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 250*time.Millisecond) {
		err := action()
		if !errors.Is(err, process.ErrBusy) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// reasonProblem says what is wrong with an operator's reason entered in the console, or "": the
// rule of the API (commandbus.OperatorAction.Validate), at most commandbus.MaxReasonLength
// characters counted as Unicode code points, not bytes, and no control characters but line
// breaks and tabs.
func reasonProblem(reason string) string {
	n := utf8.RuneCountInString(reason)
	if n > commandbus.MaxReasonLength {
		return fmt.Sprintf("Keep the reason to %d characters or fewer; it has %d.", commandbus.MaxReasonLength, n)
	}
	if msg := (input.Text{Max: commandbus.MaxReasonLength, Multiline: true}).Check(reason); msg != "" {
		return "The reason " + msg + "."
	}
	return ""
}
