package zapenc

// The reflected-struct benchmark's value, twice: msgpOrder with msgp-generated code (what a
// user gets from `go generate` on their own types) and reflOrder, the same shape without
// it, for the reflection encoder and for encoding/json through zap's JSON encoder.
// Regenerate with `go generate` (make generate); make test checks the output is current.

//go:generate go tool msgp -file=bench_types_test.go -o=bench_types_gen_test.go -unexported -io=false -tests=false

//msgp:ignore reflOrder reflCustomer reflItem

type msgpOrder struct {
	ID       string            `msg:"id" json:"id"`
	Customer msgpCustomer      `msg:"customer" json:"customer"`
	Items    []msgpItem        `msg:"items" json:"items"`
	Total    float64           `msg:"total" json:"total"`
	Currency string            `msg:"currency" json:"currency"`
	Paid     bool              `msg:"paid" json:"paid"`
	Tags     []string          `msg:"tags" json:"tags"`
	Attempts int               `msg:"attempts" json:"attempts"`
	Labels   map[string]string `msg:"labels" json:"labels"`
}

type msgpCustomer struct {
	ID      int64  `msg:"id" json:"id"`
	Email   string `msg:"email" json:"email"`
	Country string `msg:"country" json:"country"`
}

type msgpItem struct {
	SKU   string  `msg:"sku" json:"sku"`
	Qty   int     `msg:"qty" json:"qty"`
	Price float64 `msg:"price" json:"price"`
}

type reflOrder struct {
	ID       string            `json:"id"`
	Customer reflCustomer      `json:"customer"`
	Items    []reflItem        `json:"items"`
	Total    float64           `json:"total"`
	Currency string            `json:"currency"`
	Paid     bool              `json:"paid"`
	Tags     []string          `json:"tags"`
	Attempts int               `json:"attempts"`
	Labels   map[string]string `json:"labels"`
}

type reflCustomer struct {
	ID      int64  `json:"id"`
	Email   string `json:"email"`
	Country string `json:"country"`
}

type reflItem struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

func benchOrderValue() reflOrder {
	return reflOrder{
		ID:       "ord-20240506-000123",
		Customer: reflCustomer{ID: 884422, Email: "ann@example.com", Country: "JP"},
		Items: []reflItem{
			{SKU: "book-0451", Qty: 2, Price: 12.5},
			{SKU: "pen-0007", Qty: 10, Price: 0.99},
			{SKU: "bag-0100", Qty: 1, Price: 49},
		},
		Total:    83.9,
		Currency: "JPY",
		Paid:     true,
		Tags:     []string{"gift", "express"},
		Attempts: 1,
		Labels:   map[string]string{"channel": "web", "campaign": "spring"},
	}
}

func benchOrderMsgp() msgpOrder {
	r := benchOrderValue()
	m := msgpOrder{ID: r.ID, Customer: msgpCustomer(r.Customer), Total: r.Total, Currency: r.Currency,
		Paid: r.Paid, Tags: r.Tags, Attempts: r.Attempts, Labels: r.Labels}
	for _, it := range r.Items {
		m.Items = append(m.Items, msgpItem(it))
	}
	return m
}
