package paymentsweb

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/commandbus/commandbus/examples/payments"
)

// The console's payment lists are read a page at a time by the keysets the API's cursors name:
// a page's marker parameter holds the key of the last row of the previous page (as the API's
// cursor keys write it, not encoded), so a page resumes strictly after it and rows written
// meanwhile neither repeat nor shift the pages. A full page links to the next one: no list is
// cut short without saying so.

// badMarker is the problem of a marker the page did not make.
const badMarker = "The page marker is not one this page makes."

// paging is one page of a console list: its size and marker as the request gives them, the
// links to the next page and back to the first, and the problem when the request's size or
// marker cannot be read (the page then shows no rows and answers 400).
type paging struct {
	// Size is the most rows the page shows.
	Size int
	// Marker is the key of the row the page resumes after ("" on the first page).
	Marker string
	// Next links to the page after this one (empty on the last page); First, to the first page
	// with the same filters (empty on it).
	Next, First string
	// Problem says why the page's size or marker cannot be read.
	Problem string

	path, param string
	def         int
	keep        url.Values
}

// readPaging reads the page of the list at path from r: ?limit is the page size (1 to most,
// default def) and ?param the marker. keep are the filters every page link carries.
func readPaging(r *http.Request, path, param string, def, most int, keep url.Values) *paging {
	q := r.URL.Query()
	p := &paging{Size: def, Marker: strings.TrimSpace(q.Get(param)), path: path, param: param, def: def, keep: keep}
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > most {
			p.Problem = "The page size (limit) must be a whole number from 1 to " + strconv.Itoa(most) + "."
		} else {
			p.Size = n
		}
	}
	if p.Marker != "" || p.Problem != "" {
		p.First = p.link("")
	}
	return p
}

// fail notes that the page cannot be read: its rows are not shown and it answers 400.
// timeCursor reads the marker of a list ordered by time and id: nil without one; a marker that
// is not such a key fails the page.
func (p *paging) timeCursor() *payments.PageCursor {
	if p.Marker == "" {
		return nil
	}
	cursor, ok := parseTimeKey(p.Marker)
	if !ok {
		p.fail(badMarker)
	}
	return cursor
}

func (p *paging) fail(problem string) {
	p.Problem, p.First = problem, p.link("")
}

// status is the page's HTTP status: 400 when its size or marker cannot be read.
func (p *paging) status() int {
	if p.Problem != "" {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// link is the path of the page after marker ("" for the first page), with the page's filters
// and its size when not the default.
func (p *paging) link(marker string) string {
	q := url.Values{}
	for k, v := range p.keep {
		q[k] = v
	}
	if p.Size != p.def && p.Problem == "" {
		q.Set("limit", strconv.Itoa(p.Size))
	}
	if marker != "" {
		q.Set(p.param, marker)
	}
	if len(q) == 0 {
		return p.path
	}
	return p.path + "?" + q.Encode()
}

// query is the request's own parameters as the page read them: its filters, size and marker
// (for a live region, which must show the same page).
func (p *paging) query() url.Values {
	q := url.Values{}
	for k, v := range p.keep {
		q[k] = v
	}
	if p.Size != p.def {
		q.Set("limit", strconv.Itoa(p.Size))
	}
	if p.Marker != "" {
		q.Set(p.param, p.Marker)
	}
	return q
}

// cut keeps the page's rows of rows, which were read with a limit of Size+1: a row beyond Size
// says a next page follows, which resumes after the last row kept (key gives a row's marker).
func cut[T any](p *paging, rows []T, key func(T) string) []T {
	if len(rows) <= p.Size {
		return rows
	}
	rows = rows[:p.Size]
	p.Next = p.link(key(rows[len(rows)-1]))
	return rows
}
