package driver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits on custom search attributes.
const (
	// MaxAttributeKeyLength bounds an attribute key, in bytes.
	MaxAttributeKeyLength = 64
	// MaxAttributeValueLength bounds an attribute value, in bytes.
	MaxAttributeValueLength = 1024
)

// ErrInvalidAttribute is wrapped by every attribute validation error.
var ErrInvalidAttribute = errors.New("invalid execution attribute")

// ValidateAttributeKey checks that key is 1 to MaxAttributeKeyLength characters of letters,
// digits, '_', '.' and '-'.
func ValidateAttributeKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrInvalidAttribute)
	}
	if len(key) > MaxAttributeKeyLength {
		return fmt.Errorf("%w: key %.20q… is %d characters long; at most %d are allowed", ErrInvalidAttribute, key, len(key), MaxAttributeKeyLength)
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return fmt.Errorf("%w: key %q has %q; keys are letters, digits, '_', '.' and '-'", ErrInvalidAttribute, key, r)
		}
	}
	return nil
}

// ValidateAttribute checks a key (see ValidateAttributeKey) and a value of at most
// MaxAttributeValueLength bytes of valid UTF-8 without control characters (PostgreSQL text holds
// no NUL, and both drivers must store the same values). An empty value is valid: where attributes
// are written it removes the attribute.
func ValidateAttribute(key, value string) error {
	if err := ValidateAttributeKey(key); err != nil {
		return err
	}
	if len(value) > MaxAttributeValueLength {
		return fmt.Errorf("%w: the value of %q is %d bytes long; at most %d are allowed", ErrInvalidAttribute, key, len(value), MaxAttributeValueLength)
	}
	if !utf8.ValidString(value) {
		return fmt.Errorf("%w: the value of %q is not valid UTF-8", ErrInvalidAttribute, key)
	}
	for _, r := range value {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: the value of %q has the control character %q", ErrInvalidAttribute, key, r)
		}
	}
	return nil
}

// ValidateAttributes checks every attribute of attrs and returns all problems at once, in key
// order.
func ValidateAttributes(attrs map[string]string) error {
	var errs []error
	for _, k := range sortedAttributeKeys(attrs) {
		if err := ValidateAttribute(k, attrs[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ValidateAttributeSearch checks the attributes of an ExecutionListParams: valid keys and
// non-empty values (a search matches stored attributes, and an empty value is never stored).
func ValidateAttributeSearch(attrs map[string]string) error {
	var errs []error
	for _, k := range sortedAttributeKeys(attrs) {
		if err := ValidateAttribute(k, attrs[k]); err != nil {
			errs = append(errs, err)
		} else if attrs[k] == "" {
			errs = append(errs, fmt.Errorf("%w: searching %q for an empty value; attributes with empty values are not stored", ErrInvalidAttribute, k))
		}
	}
	return errors.Join(errs...)
}

// SortedAttributes returns attrs as key/value pairs in key order, so drivers write them in a
// stable order.
func SortedAttributes(attrs map[string]string) (keys, values []string) {
	keys = sortedAttributeKeys(attrs)
	values = make([]string, len(keys))
	for i, k := range keys {
		values[i] = attrs[k]
	}
	return keys, values
}

func sortedAttributeKeys(attrs map[string]string) []string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Retention batch sizes.
const (
	// DefaultDeleteExpiredLimit is how many executions one ExecutionDeleteExpired call deletes
	// when Limit is zero.
	DefaultDeleteExpiredLimit = 500
	// MaxDeleteExpiredLimit caps Limit, so one call stays a short transaction.
	MaxDeleteExpiredLimit = 5000
)

// ExecutionDeleteExpiredParams deletes ended executions (COMPLETED, COMPENSATED, CANCELLED,
// FAILED) whose completed_at is before Before, oldest first, at most Limit of them
// (DefaultDeleteExpiredLimit when zero, at most MaxDeleteExpiredLimit), with everything stored
// under them: log, responses and attributes.
type ExecutionDeleteExpiredParams struct {
	Before time.Time
	Limit  int
}

// BatchLimit returns Limit with its default and cap applied.
func (p *ExecutionDeleteExpiredParams) BatchLimit() int {
	switch {
	case p.Limit <= 0:
		return DefaultDeleteExpiredLimit
	case p.Limit > MaxDeleteExpiredLimit:
		return MaxDeleteExpiredLimit
	}
	return p.Limit
}

// ExecutionAttributeExecutor holds the queries of custom search attributes and retention. The
// attributes are also written by ExecutionInsertMany (ExecutionInsertParams.Attributes) and
// ExecutionCheckpointMany (ExecutionCheckpoint.Attributes), and searched by ExecutionList
// (ExecutionListParams.Attributes).
type ExecutionAttributeExecutor interface {
	// ExecutionAttributes returns an execution's attributes; an empty map when it has none or
	// does not exist.
	ExecutionAttributes(ctx context.Context, id uuid.UUID) (map[string]string, error)
	// ExecutionDeleteExpired deletes one batch of ended executions older than the retention and
	// returns how many it deleted; a caller deletes everything due by calling it until it
	// returns fewer than the batch limit. It takes no lock a poller or runner waits on: rows
	// another transaction holds are skipped (they are not ended anyway, or will be deleted by
	// the next call).
	ExecutionDeleteExpired(ctx context.Context, params *ExecutionDeleteExpiredParams) (int, error)
}
