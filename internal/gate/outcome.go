package gate

// The outcomes of one test, for readers outside the package (the judge).
const (
	Pass = pass
	Fail = fail
	Skip = skip
)
