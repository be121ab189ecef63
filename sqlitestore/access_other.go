//go:build !unix

package sqlitestore

// mayNotWrite reports nothing where access(2) is not available: a file
// that cannot be written shows at the first write, as ErrReadOnly.
func mayNotWrite(string) error { return nil }

// cannotWrite reports nothing where access(2) is not available.
func cannotWrite(string) error { return nil }
