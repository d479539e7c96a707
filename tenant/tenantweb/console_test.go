package tenantweb_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
)

var (
	tenantRowRE = regexp.MustCompile(`<tr data-id="([^"]+)" data-tier=`)
	nextPageRE  = regexp.MustCompile(`<a href="([^"]+)" id="next-page"`)
)

// The Tenants page shows a page of tenants by id with a link to the next: following the links
// shows every tenant once, in id order.
func TestTenantsPagePagesThroughTenants(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		var want []string
		for i := range 101 { // a page and one
			id := fmt.Sprintf("t%03d", i)
			status, body := f.call(t, "POST", "/api/tenants", map[string]any{"id": id, "tier": "FREE"}, operatorToken)
			require.Equal(t, http.StatusCreated, status, string(body))
			want = append(want, id)
		}
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		b := &servertest.Browserless{T: t, Base: f.url, Client: &http.Client{Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		b.Login(viewerToken)

		var seen []string
		path := "/tenants"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, "the pages end")
			resp, body := b.Get(path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			rows := tenantRowRE.FindAllStringSubmatch(body, -1)
			for _, m := range rows {
				seen = append(seen, m[1])
			}
			if pages == 0 {
				require.Len(t, rows, 100, "the first page holds a page, not every tenant")
			} else {
				require.Contains(t, body, `id="first-page"`, "a later page links to the first")
			}
			next := nextPageRE.FindStringSubmatch(body)
			if next == nil {
				break
			}
			path = html.UnescapeString(next[1])
		}
		require.Equal(t, want, seen, "every tenant once, by id")
	})
}
