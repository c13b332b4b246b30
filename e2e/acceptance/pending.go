package acceptance

// Missing is why a scenario cannot run yet: the piece that does not exist
// and the issue that adds it (0: no issue filed yet).
type Missing struct {
	Piece string
	Issue int
}

// Pending lists the scenarios (by number in the acceptance list) whose
// feature is not implemented yet. They are skipped with this reason, never
// silently, and printed at the end of the suite. Remove an entry in the
// change that lands the feature; the scenario then has to pass.
var Pending = map[int]Missing{}
