package pgstore

import (
	"net/url"
	"regexp"
	"strings"
)

// kvPassword finds the password and sslpassword values of a key=value DSN
// or of a URL's query, quoted or not.
var kvPassword = regexp.MustCompile(`(?i)(?:^|[\s?&;])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s&]*)`)

// redactDSN hides in msg, an error about dsn, every password that dsn may
// hold. The driver's own redaction is best effort (a DSN that does not
// parse is ambiguous, and parts of it are quoted in the error's detail), so
// the values are looked for in dsn itself and masked wherever msg repeats
// them, as well as after any "password=".
func redactDSN(msg, dsn string) string {
	var secrets []string
	add := func(s string) {
		if len(s) >= 3 { // shorter ones would mask half the message
			secrets = append(secrets, s)
			if u, err := url.PathUnescape(s); err == nil && u != s && len(u) >= 3 {
				secrets = append(secrets, u)
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		v := m[1]
		add(v)
		if strings.HasPrefix(v, "'") {
			v = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
			add(v)
			add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v))
		}
	}
	// A URL's userinfo: the password follows the first ':' up to an '@'
	// (which one is ambiguous in a broken URL, so take each).
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if c := strings.IndexByte(rest, ':'); c >= 0 {
			for at := c + 1; at < len(rest); at++ {
				if rest[at] == '@' {
					add(rest[c+1 : at])
				}
			}
		}
	}
	// Longest first, so that a secret containing another is masked whole.
	for i := 1; i < len(secrets); i++ {
		for j := i; j > 0 && len(secrets[j]) > len(secrets[j-1]); j-- {
			secrets[j], secrets[j-1] = secrets[j-1], secrets[j]
		}
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return redactAll(msg)
}

// redactAll masks the value after every "password=" in msg.
func redactAll(msg string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, "password=")
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		i += len("password=")
		b.WriteString(msg[:i])
		msg = msg[i:]
		j := strings.IndexAny(msg, " '`\"\\&)")
		if strings.HasPrefix(msg, "'") {
			j = strings.IndexByte(msg[1:], '\'') + 2 // through the closing quote
			if j == 1 {
				j = len(msg)
			}
		}
		if j < 0 {
			j = len(msg)
		}
		b.WriteString("xxxxx")
		msg = msg[j:]
	}
}
