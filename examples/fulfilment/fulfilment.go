// Package fulfilment is the reference saga with fan-out: an order's line items are reserved one
// step instance per item (ExpandEach, "reserve:SKU"), in parallel, then the customer is charged
// and the parcel shipped. When a step fails, the saga compensates with the GROUPED_PARALLEL
// policy: the charge is refunded first, then every reservation is released together (they are
// one layer of the DAG). An item out of stock fails its own instance only; the reservations of the
// other items are released. An address the carrier cannot deliver to fails the shipment after the
// charge.
//
// The warehouse and the payment provider are in memory and idempotent by key.
package fulfilment

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

// Type is the saga id.
const Type = "OrderFulfilment"

// LineItem is one line of an order.
type LineItem struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Price    int64  `json:"price"`
}

// Order is the saga's input.
type Order struct {
	ID      string     `json:"id"`
	Address string     `json:"address"`
	Items   []LineItem `json:"items"`
}

func items(o Order) []LineItem { return o.Items }

// Shop is the warehouse stock, the payment provider's charges and the carrier's shipments.
type Shop struct {
	mu       sync.Mutex
	stock    map[string]int
	reserved map[string]LineItem // by step key
	charges  map[string]int64    // by step key
	// Shipped lists the orders shipped; Log lists compensations in the order they ran.
	Shipped []string
	Log     []string
}

// NewShop returns a shop with the given stock per SKU.
func NewShop(stock map[string]int) *Shop {
	s := &Shop{stock: map[string]int{}, reserved: map[string]LineItem{}, charges: map[string]int64{}}
	for k, v := range stock {
		s.stock[k] = v
	}
	return s
}

// DemoStock is the stock the demo binary's shop opens with: plenty of mugs and tees, two caps
// (an order of three caps shows an item out of stock).
func DemoStock() map[string]int { return map[string]int{"MUG": 1000, "TEE": 1000, "CAP": 2} }

// Stock returns the units of sku in stock.
func (s *Shop) Stock(sku string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock[sku]
}

// Charged is the sum of the charges not refunded.
func (s *Shop) Charged() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum int64
	for _, v := range s.charges {
		sum += v
	}
	return sum
}

// Definition returns the fulfilment saga bound to the shop.
func (s *Shop) Definition() *saga.Definition {
	return saga.New(Type, 1).
		Describe("Reserve every line item (one instance each), charge, ship; refund then release all reservations together on failure").
		Domain("fulfilment").
		Policy(saga.GroupedParallel).
		Step("reserve", s.reserve, saga.ExpandEach(items, func(it LineItem) string { return it.SKU }), saga.Compensate(s.release)).
		Step("charge", s.charge, saga.DependsOn("reserve"), saga.Compensate(s.refund)).
		Step("ship", s.ship, saga.DependsOn("charge"))
}

// Register registers the fulfilment saga with the runtime.
func (s *Shop) Register(rt *orchestration.Runtime) (*saga.Manager, error) {
	return saga.Register(rt, s.Definition())
}

func (s *Shop) reserve(ctx context.Context, sc *saga.StepContext) (any, error) {
	item, err := saga.Item[LineItem](sc)
	if err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.reserved[sc.Key()]; !done {
		if s.stock[item.SKU] < item.Quantity {
			return nil, commandbus.BusinessRule("OUT_OF_STOCK", fmt.Sprintf("%s: %d in stock, %d ordered", item.SKU, s.stock[item.SKU], item.Quantity))
		}
		s.stock[item.SKU] -= item.Quantity
		s.reserved[sc.Key()] = item
	}
	return map[string]any{"sku": item.SKU, "reserved": item.Quantity}, nil
}

func (s *Shop) release(ctx context.Context, sc *saga.StepContext) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if item, ok := s.reserved[sc.Key()]; ok {
		s.stock[item.SKU] += item.Quantity
		delete(s.reserved, sc.Key())
		s.Log = append(s.Log, "release "+item.SKU)
	}
	return nil
}

func (s *Shop) charge(ctx context.Context, sc *saga.StepContext) (any, error) {
	var o Order
	if err := sc.DecodeInput(&o); err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	var total int64
	for _, it := range o.Items {
		total += int64(it.Quantity) * it.Price
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.charges[sc.Key()] = total
	return map[string]int64{"charged": total}, nil
}

func (s *Shop) refund(ctx context.Context, sc *saga.StepContext) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.charges[sc.Key()]; ok {
		delete(s.charges, sc.Key())
		s.Log = append(s.Log, "refund")
	}
	return nil
}

func (s *Shop) ship(ctx context.Context, sc *saga.StepContext) (any, error) {
	var o Order
	if err := sc.DecodeInput(&o); err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	if strings.Contains(o.Address, "Atlantis") {
		return nil, commandbus.BusinessRule("UNDELIVERABLE", "the carrier does not deliver to "+o.Address)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Shipped = append(s.Shipped, o.ID)
	return map[string]string{"tracking": "TRK-" + o.ID}, nil
}
