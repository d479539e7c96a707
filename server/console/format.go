package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/money"
)

// consoleFuncs are the template helpers: formatting only, no queries.
func consoleFuncs(assets map[string]string) template.FuncMap {
	return template.FuncMap{
		"asset":       func(name string) string { return assets[name] },
		"time":        formatTime,
		"dur":         formatDuration,
		"num":         formatNumber,
		"rate":        func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
		"short":       shortID,
		"terminal":    terminal,
		"isZeroID":    func(id uuid.UUID) bool { return id == uuid.Nil },
		"json":        prettyJSON,
		"money":       templateMoney,
		"age":         formatAge,
		"statusClass": statusClass,
		"statusIcon":  statusIcon,
		"pct":         percent,
		"str":         func(v any) string { return fmt.Sprint(v) },
		"upper":       strings.ToUpper,
		"stepDetail":  stepDetail,
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
	}
}

// formatTime shows a time in UTC to the second; nil and zero show a dash.
func formatTime(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	}
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// templateMoney is the templates' money helper: it takes a decimal or a money.Amount.
func templateMoney(amount any, cur string) (string, error) {
	switch a := amount.(type) {
	case decimal.Decimal:
		return formatMoney(a, cur), nil
	case money.Amount:
		return formatMoney(a.Decimal(), cur), nil
	case *money.Amount:
		if a == nil {
			return "—", nil
		}
		return formatMoney(a.Decimal(), cur), nil
	}
	return "", fmt.Errorf("money: %T is not an amount", amount)
}

// formatMoney shows an amount to its currency's minor units with thousands grouped:
// "1,082,325 JPY", "284.50 EUR". An amount with more places than its currency has (an FX rate
// applied, say) keeps them rather than round away money.
func formatMoney(d decimal.Decimal, cur string) string {
	text := money.Format(d, cur)
	sign := ""
	if strings.HasPrefix(text, "-") {
		sign, text = "-", text[1:]
	}
	whole, fraction, hasFraction := strings.Cut(text, ".")
	grouped := groupThousands(whole)
	if hasFraction {
		grouped += "." + fraction
	}
	return strings.TrimSpace(sign + grouped + " " + cur)
}

// formatAge says how long ago a time was, coarsely: "45s", "12m", "3h 05m", "2d 4h".
func formatAge(since any, now time.Time) string {
	var t time.Time
	switch x := since.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	}
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// groupThousands puts a comma between every three digits of a string of digits.
func groupThousands(digits string) string {
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// formatNumber groups thousands with commas.
func formatNumber(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case float64:
		n = int64(math.Round(x))
	default:
		return fmt.Sprint(v)
	}
	s := strconv.FormatInt(n, 10)
	if neg := strings.HasPrefix(s, "-"); neg {
		return "-" + groupThousands(s[1:])
	}
	return groupThousands(s)
}

// shortID names an id by its last eight characters: the random end of a UUIDv7, whose start is a
// timestamp shared by everything created in the same minute.
func shortID(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 8 {
		return "…" + s[len(s)-8:]
	}
	return s
}

// terminal reports whether a status (an execution's or a business item's) is final.
func terminal(status any) bool {
	switch fmt.Sprint(status) {
	case "COMPLETED", "COMPENSATED", "CANCELLED", "FAILED":
		return true
	}
	return false
}

// prettyJSON indents JSON for a <pre>; anything else is shown as it is.
func prettyJSON(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	case string:
		raw = []byte(x)
	default:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func percent(part, whole int) int {
	if whole <= 0 {
		return 0
	}
	return int(math.Round(100 * float64(part) / float64(whole)))
}

// statusClass groups statuses for styling. The text always says the status too: colour is never
// the only signal.
func statusClass(status any) string {
	switch strings.ToUpper(fmt.Sprint(status)) {
	case "COMPLETED", "SUCCEEDED", "SATISFIED", "RECORDED", "APPLIED", "COMPENSATION_SUCCESS", "APPROVED", "ACCEPTED", "DONE", "COMPLETE",
		"RECEIVED":
		return "ok"
	case "IN_TSQ", "WAITING_FOR_TSQ", "FAILED", "REPLY_FAILED", "COMPENSATION_FAILED", "TIMED_OUT", "REJECTED", "NONDETERMINISTIC",
		"STOPPED":
		return "bad"
	case "WAITING", "WAITING_FOR_ASYNC", "WAITING_FOR_RETRY", "RETRYING", "WAITING_RETRY", "PENDING", "PARTIAL",
		"COMPENSATING", "COMPENSATED", "CANCELLED", "SCHEDULED", "WAITING FOR OPERATOR",
		"WAITING_FOR_OPERATORS":
		return "warn"
	case "RUNNING", "EXECUTING", "PROCESSING", "SENT", "NEW":
		return "info"
	}
	return "muted"
}

func statusIcon(status any) string {
	switch statusClass(status) {
	case "ok":
		return "✓"
	case "bad":
		return "✕"
	case "warn":
		return "◷"
	case "info":
		return "▶"
	}
	return "•"
}
