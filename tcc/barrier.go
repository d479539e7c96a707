package tcc

// BranchID names one participant's branch of a transaction: the key of its barrier records.
type BranchID struct {
	// Transaction is the transaction's id.
	Transaction string `json:"transaction"`
	// Participant is the participant's id.
	Participant string `json:"participant"`
}
