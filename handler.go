package commandbus

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Handler handles commands of one type. The returned result is JSON encoded into the success
// reply; the returned error is classified with errors.As (see TransientError, PermanentError and
// BusinessRuleError). A handler may run more than once for the same command (at-least-once
// delivery): guard side effects with cmd.IdempotencyKey().
type Handler[T CommandArgs] interface {
	Handle(ctx context.Context, cmd *Command[T]) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc[T CommandArgs] func(ctx context.Context, cmd *Command[T]) (any, error)

// Handle calls f.
func (f HandlerFunc[T]) Handle(ctx context.Context, cmd *Command[T]) (any, error) {
	return f(ctx, cmd)
}

// ReplyHandler handles replies arriving on a domain's reply queue. Errors are classified like a
// command handler's; a reply that keeps failing goes to the troubleshooting queue.
type ReplyHandler func(ctx context.Context, msg *ReplyMessage) error

// Handlers is the registry of command and reply handlers, keyed by domain and command type.
type Handlers struct {
	mu       sync.RWMutex
	commands map[string]map[string]*handlerEntry // domain -> type -> entry
	replies  map[string]map[string]ReplyHandler  // domain -> command type ("" = any) -> handler
}

type handlerEntry struct {
	kind   string
	handle func(ctx context.Context, row *CommandRow) (any, error)
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers {
	return &Handlers{commands: map[string]map[string]*handlerEntry{}, replies: map[string]map[string]ReplyHandler{}}
}

// AddHandler registers handler for commands of T's kind in domain. It panics on a duplicate
// registration or an invalid domain, which are programming errors found at start-up.
func AddHandler[T CommandArgs](h *Handlers, domain string, handler Handler[T]) {
	var zero T
	kind := zero.Kind()
	if err := h.add(domain, kind, &handlerEntry{kind: kind, handle: func(ctx context.Context, row *CommandRow) (any, error) {
		var args T
		if err := json.Unmarshal(row.Data, &args); err != nil {
			return nil, &Error{Code: CodeInvalidData, Message: fmt.Sprintf("decoding %s data: %v", kind, err)}
		}
		return handler.Handle(ctx, &Command[T]{CommandRow: row, Args: args})
	}}); err != nil {
		panic(err)
	}
}

// AddRawHandler registers a handler for commands of type kind in domain that receives the JSON
// data undecoded.
func AddRawHandler(h *Handlers, domain, kind string, handler func(ctx context.Context, cmd *Command[RawArgs]) (any, error)) {
	if err := h.add(domain, kind, &handlerEntry{kind: kind, handle: func(ctx context.Context, row *CommandRow) (any, error) {
		return handler(ctx, &Command[RawArgs]{CommandRow: row, Args: RawArgs{Type: row.Type, Data: row.Data}})
	}}); err != nil {
		panic(err)
	}
}

// AddReplyHandler registers handler for replies to commands of commandType that arrive on
// domain's reply queue; an empty commandType catches replies no specific handler takes.
func AddReplyHandler(h *Handlers, domain, commandType string, handler ReplyHandler) {
	if !validName(domain) {
		panic(fmt.Sprintf("commandbus: AddReplyHandler: invalid domain %q", domain))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.replies[domain] == nil {
		h.replies[domain] = map[string]ReplyHandler{}
	}
	if _, dup := h.replies[domain][commandType]; dup {
		panic(fmt.Sprintf("commandbus: AddReplyHandler: a reply handler for domain %q and type %q is already registered", domain, commandType))
	}
	h.replies[domain][commandType] = handler
}

func (h *Handlers) add(domain, kind string, entry *handlerEntry) error {
	if !validName(domain) {
		return fmt.Errorf("commandbus: AddHandler: invalid domain %q (lower-case letters, digits, '-' or '_', starting with a letter)", domain)
	}
	if kind == "" {
		return fmt.Errorf("commandbus: AddHandler: Kind() of the args type returns an empty string")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.commands[domain] == nil {
		h.commands[domain] = map[string]*handlerEntry{}
	}
	if _, dup := h.commands[domain][kind]; dup {
		return fmt.Errorf("commandbus: AddHandler: a handler for %q in domain %q is already registered", kind, domain)
	}
	h.commands[domain][kind] = entry
	return nil
}

func (h *Handlers) command(domain, kind string) *handlerEntry {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.commands[domain][kind]
}

func (h *Handlers) reply(domain, commandType string) ReplyHandler {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if r, ok := h.replies[domain][commandType]; ok {
		return r
	}
	return h.replies[domain][""]
}

// commandDomains lists domains with command handlers.
func (h *Handlers) commandDomains() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return sortedKeys(h.commands)
}

// replyDomains lists domains with reply handlers.
func (h *Handlers) replyDomains() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return sortedKeys(h.replies)
}
