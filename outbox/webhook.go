package outbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// TransportWebhook is the transport of messages POSTed to HTTP endpoints (WebhookPublisher); an
// outbox message's topic names its endpoint.
const TransportWebhook = "webhook"

// The headers of a webhook request. The signature is "sha256=" and the hex HMAC-SHA256, keyed
// with the endpoint's secret, of the timestamp, a dot and the body: a receiver checks it with
// VerifyWebhook and refuses old timestamps to stop replays.
const (
	HeaderWebhookSignature = "X-Commandbus-Signature"
	HeaderWebhookTimestamp = "X-Commandbus-Timestamp"
	HeaderWebhookMessageID = "X-Commandbus-Message-Id"
	HeaderWebhookType      = "X-Commandbus-Type"
)

// DefaultWebhookMaxAttempts is how many failed deliveries make a webhook message FAILED (its dead
// letter, which an operator can resend).
const DefaultWebhookMaxAttempts = 8

// WebhookEndpoint is one HTTP endpoint messages are POSTed to.
type WebhookEndpoint struct {
	// URL receives the POST (http or https). Required.
	URL string
	// Secret keys the HMAC-SHA256 signature. Required: an unsigned webhook cannot be trusted.
	Secret string
	// Timeout bounds one delivery. Default: 10s.
	Timeout time.Duration
}

// WebhookConfig configures a WebhookPublisher.
type WebhookConfig struct {
	// Endpoints by name: an outbox message whose topic is the name goes to the endpoint.
	Endpoints map[string]WebhookEndpoint
	// MaxAttempts is how many failed deliveries make a message FAILED. Default:
	// DefaultWebhookMaxAttempts. The relay's backoff spaces the attempts.
	MaxAttempts int
	// Client sends the requests. Default: a client without a timeout of its own (each endpoint's
	// Timeout applies).
	Client *http.Client
	// Now stamps the signature's timestamp. Default: time.Now.
	Now func() time.Time
	// Concurrency bounds the keys delivered at once. Default: 16.
	Concurrency int
}

// WebhookPublisher POSTs outbox messages to HTTP endpoints, signed. A 2xx answer delivers the
// message; a timeout, a network error, a 5xx, 408 or 429 is retried with the relay's backoff; any
// other answer cannot succeed by retrying and makes the message FAILED at once. Messages of one
// key are delivered one after the other; after a failure the rest of the key waits (ErrNotSent).
type WebhookPublisher struct {
	cfg WebhookConfig
}

// NewWebhookPublisher validates cfg and returns the publisher.
func NewWebhookPublisher(cfg WebhookConfig) (*WebhookPublisher, error) {
	var errs []error
	if len(cfg.Endpoints) == 0 {
		errs = append(errs, errors.New("outbox: webhook: Endpoints: at least one endpoint is required"))
	}
	for name, ep := range cfg.Endpoints {
		u, err := url.Parse(ep.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("outbox: webhook: Endpoints[%q].URL: %q is not an http(s) URL", name, ep.URL))
		}
		if ep.Secret == "" {
			errs = append(errs, fmt.Errorf("outbox: webhook: Endpoints[%q].Secret: required to sign the requests", name))
		}
		if ep.Timeout < 0 {
			errs = append(errs, fmt.Errorf("outbox: webhook: Endpoints[%q].Timeout: must not be negative", name))
		}
	}
	if cfg.MaxAttempts < 0 {
		errs = append(errs, errors.New("outbox: webhook: MaxAttempts: must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultWebhookMaxAttempts
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	return &WebhookPublisher{cfg: cfg}, nil
}

// Transport returns TransportWebhook.
func (p *WebhookPublisher) Transport() string { return TransportWebhook }

// MaxAttempts returns how many failed deliveries make a message FAILED.
func (p *WebhookPublisher) MaxAttempts() int { return p.cfg.MaxAttempts }

// Publish delivers msgs, the messages of one key in order and keys concurrently.
func (p *WebhookPublisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	errs := make([]error, len(msgs))
	byKey := map[string][]int{}
	var keys []string
	for i, m := range msgs {
		k := m.Key
		if k == "" {
			k = "\x00" + strconv.Itoa(i) // no key: no order with the others
		}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func(idx []int) {
			defer func() { <-sem; wg.Done() }()
			failed := false
			for _, i := range idx {
				if failed {
					errs[i] = ErrNotSent
					continue
				}
				if errs[i] = p.deliver(ctx, msgs[i]); errs[i] != nil {
					failed = true
				}
			}
		}(byKey[k])
	}
	wg.Wait()
	return errs
}

func (p *WebhookPublisher) deliver(ctx context.Context, m *driver.OutboxRow) error {
	ep, ok := p.cfg.Endpoints[m.Topic]
	if !ok {
		return Permanent(fmt.Errorf("webhook endpoint %q is not configured", m.Topic))
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(m.Payload))
	if err != nil {
		return Permanent(err)
	}
	timestamp := strconv.FormatInt(p.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderWebhookTimestamp, timestamp)
	req.Header.Set(HeaderWebhookSignature, SignWebhook(ep.Secret, timestamp, m.Payload))
	req.Header.Set(HeaderWebhookMessageID, m.MessageID)
	req.Header.Set(HeaderWebhookType, m.Type)
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %q: %w", m.Topic, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("webhook %q answered %d: %s", m.Topic, resp.StatusCode, strings.TrimSpace(string(body)))
	default:
		return Permanent(fmt.Errorf("webhook %q answered %d: %s", m.Topic, resp.StatusCode, strings.TrimSpace(string(body))))
	}
}

// SignWebhook returns the signature header value of body sent at timestamp (Unix seconds).
func SignWebhook(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifyWebhook checks a webhook request's signature over body, and that its timestamp is within
// maxAge of now (zero maxAge: not checked).
func VerifyWebhook(secret string, header http.Header, body []byte, now time.Time, maxAge time.Duration) error {
	timestamp := header.Get(HeaderWebhookTimestamp)
	sent, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: %s %q is not a Unix time", HeaderWebhookTimestamp, timestamp)
	}
	if maxAge > 0 && now.Sub(time.Unix(sent, 0)).Abs() > maxAge {
		return fmt.Errorf("webhook: timestamp %s is older than %s", timestamp, maxAge)
	}
	if !hmac.Equal([]byte(header.Get(HeaderWebhookSignature)), []byte(SignWebhook(secret, timestamp, body))) {
		return errors.New("webhook: the signature does not match")
	}
	return nil
}
