package backend

// SetSplitAt makes policies split above f times the size emit allows, and returns the function
// that restores it.
func SetSplitAt(f float64) (restore func()) {
	old := splitAt
	splitAt = f
	return func() { splitAt = old }
}
