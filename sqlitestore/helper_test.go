package sqlitestore_test

import "os"

// helperMain runs this test binary as a helper process when the
// environment asks for one, and reports whether it did.
func helperMain() bool {
	if os.Getenv("SQLITESTORE_HELPER") == "" {
		return false
	}
	os.Exit(runHelper(os.Getenv("SQLITESTORE_HELPER"), os.Args[1:]))
	return true
}

func runHelper(role string, args []string) int { return 2 }
