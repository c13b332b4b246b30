package migration

// Missing is why a scenario cannot run yet: the piece that does not exist
// and the issue that adds it.
type Missing struct {
	Piece string
	Issue int
}

// Pending lists the scenarios (by name, see doc.go) whose feature is not
// on main yet. They are skipped with this reason, never silently, and
// printed at the end of the suite. Remove an entry in the change that lands
// the feature; the scenario then has to pass.
var Pending = map[string]Missing{}
