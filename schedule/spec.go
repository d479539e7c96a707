package schedule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// Spec is a schedule's definition (orchestration.ScheduleSpec): target, trigger, input, misfire
// policy.
type Spec = orchestration.ScheduleSpec

// MinInterval is the shortest fixed rate or fixed delay accepted.
const MinInterval = 100 * time.Millisecond

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// Request is a schedule as the REST API, the CLI and the console give it: durations are strings
// ("90s", "PT1M", or integer milliseconds such as "60000").
type Request struct {
	Name          string          `json:"name"`
	Model         string          `json:"model"`
	Type          string          `json:"type"`
	Cron          string          `json:"cron,omitempty"`
	Zone          string          `json:"zone,omitempty"`
	FixedRate     string          `json:"fixedRate,omitempty"`
	FixedDelay    string          `json:"fixedDelay,omitempty"`
	InitialDelay  string          `json:"initialDelay,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Enabled       *bool           `json:"enabled,omitempty"`
	Description   string          `json:"description,omitempty"`
	MisfirePolicy string          `json:"misfirePolicy,omitempty"`
	MisfireLimit  int             `json:"misfireLimit,omitempty"`
}

// Spec converts the request, naming the field of every duration that does not parse or is
// negative.
func (r *Request) Spec() (Spec, error) {
	var errs []error
	dur := func(field, text string) time.Duration {
		if text == "" {
			return 0
		}
		if len(text) > 0 && text[0] == '-' {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("must not be negative, got %q", text)})
			return 0
		}
		d, err := commandbus.ParseDuration(text)
		if err != nil {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: err.Error() + `; write a duration such as "90s", "PT1M" or milliseconds such as "60000"`})
			return 0
		}
		return d.Std()
	}
	spec := Spec{
		Name: r.Name, Model: r.Model, Type: r.Type, Cron: r.Cron, Zone: r.Zone,
		FixedRate: dur("fixedRate", r.FixedRate), FixedDelay: dur("fixedDelay", r.FixedDelay),
		InitialDelay: dur("initialDelay", r.InitialDelay), Input: r.Input, Description: r.Description,
		Misfire: driver.MisfirePolicy(r.MisfirePolicy), MisfireLimit: r.MisfireLimit,
	}
	if r.Enabled != nil {
		spec.Disabled = !*r.Enabled
	}
	return spec, errors.Join(errs...)
}

// RequestOf is the request that describes row, as PATCH starts from.
func RequestOf(row *driver.ScheduleRow) Request {
	enabled := row.Enabled
	r := Request{Name: row.Name, Model: row.Model, Type: row.Type, Cron: row.Cron, Zone: row.Zone,
		Input: row.Input, Enabled: &enabled, Description: row.Description, MisfirePolicy: string(row.Misfire),
		MisfireLimit: row.MisfireLimit}
	if row.InitialDelay > 0 {
		r.InitialDelay = row.InitialDelay.String()
	}
	switch row.Trigger {
	case driver.TriggerFixedRate:
		r.FixedRate = row.Interval.String()
	case driver.TriggerFixedDelay:
		r.FixedDelay = row.Interval.String()
	}
	return r
}

// definition validates spec against the runtime's registered definitions and returns what is
// stored, or every problem at once, each naming its field.
func definition(rt *orchestration.Runtime, spec Spec) (driver.ScheduleDefinition, *trigger, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(spec.Name) {
		bad("name", "%q must be 1 to 200 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", spec.Name)
	}
	switch {
	case spec.Model == "":
		bad("model", "is required (process, workflow, saga, tcc)")
	case spec.Type == "":
		bad("type", "is required: the execution type to start")
	default:
		ops := rt.Operations(spec.Model, spec.Type)
		if ops == nil {
			bad("type", "no definition is registered as %s %q", spec.Model, spec.Type)
		} else if _, ok := ops.(orchestration.Starter); !ok {
			bad("type", "%s %q cannot be started from JSON", spec.Model, spec.Type)
		}
	}
	def := driver.ScheduleDefinition{Model: spec.Model, Type: spec.Type, Zone: spec.Zone, Description: spec.Description,
		InitialDelay: spec.InitialDelay, Misfire: spec.Misfire, MisfireLimit: spec.MisfireLimit}
	kinds := 0
	if spec.Cron != "" {
		kinds++
		def.Trigger, def.Cron = driver.TriggerCron, spec.Cron
	}
	if spec.FixedRate != 0 {
		kinds++
		def.Trigger, def.Interval = driver.TriggerFixedRate, spec.FixedRate
	}
	if spec.FixedDelay != 0 {
		kinds++
		def.Trigger, def.Interval = driver.TriggerFixedDelay, spec.FixedDelay
	}
	switch {
	case spec.FixedRate < 0:
		bad("fixedRate", "must not be negative")
	case spec.FixedDelay < 0:
		bad("fixedDelay", "must not be negative")
	case kinds == 0:
		bad("cron", "one of cron, fixedRate and fixedDelay is required")
	case kinds > 1:
		bad("cron", "give only one of cron, fixedRate and fixedDelay")
	case def.Trigger != driver.TriggerCron && def.Interval < MinInterval:
		bad(map[driver.TriggerKind]string{driver.TriggerFixedRate: "fixedRate", driver.TriggerFixedDelay: "fixedDelay"}[def.Trigger],
			"must be at least %s, got %s", MinInterval, def.Interval)
	}
	if spec.InitialDelay < 0 {
		bad("initialDelay", "must not be negative")
	}
	var trig *trigger
	if def.Trigger == driver.TriggerCron && kinds == 1 {
		c, err := parseCron(spec.Cron, spec.Zone)
		if err != nil {
			errs = append(errs, err)
		} else {
			trig = &trigger{kind: driver.TriggerCron, cron: c}
		}
	} else if spec.Zone != "" {
		if _, err := time.LoadLocation(spec.Zone); err != nil {
			bad("zone", "unknown time zone %q", spec.Zone)
		}
	}
	if trig == nil && kinds == 1 && def.Interval >= MinInterval {
		trig = &trigger{kind: def.Trigger, interval: def.Interval}
	}
	switch {
	case len(spec.Input) == 0:
		def.Input = json.RawMessage(`{}`)
	case !json.Valid(spec.Input):
		bad("input", "is not valid JSON")
	default:
		var compact bytes.Buffer
		_ = json.Compact(&compact, spec.Input)
		def.Input = compact.Bytes()
	}
	switch spec.Misfire {
	case "":
		def.Misfire = driver.MisfireFireOnce
	case driver.MisfireFireOnce, driver.MisfireFireAll, driver.MisfireSkip:
	default:
		bad("misfirePolicy", "%q is not one of FIRE_ONCE, FIRE_ALL, SKIP", spec.Misfire)
	}
	if spec.MisfireLimit < 0 {
		bad("misfireLimit", "must not be negative")
	}
	if len(errs) > 0 {
		return def, nil, errors.Join(errs...)
	}
	def.SpecHash = specHash(def, spec.Disabled)
	return def, trig, nil
}

// specHash identifies a declaration, so a declared schedule is rewritten only when its
// declaration changed.
func specHash(def driver.ScheduleDefinition, disabled bool) string {
	def.SpecHash = ""
	b, _ := json.Marshal(struct {
		D        driver.ScheduleDefinition
		Disabled bool
	}{def, disabled})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
