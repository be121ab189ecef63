package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// FuzzOpenDSN: a DSN is user input (the CLI's --store). Whatever it holds,
// Open returns an error — never a panic — and no error quotes the
// password. The context is cancelled before the call, so Open parses the
// DSN and never reaches a server, however the DSN names one.
func FuzzOpenDSN(f *testing.F) {
	for _, s := range []string{
		"", "postgres://u@127.0.0.1:5432/test?sslmode=disable", "host=localhost dbname=test",
		"postgres://u@h/db?connect_timeout=x", "host=a port=99999", "postgres://[::1", "user='x",
		"postgresql://h1,h2:5433/db?target_session_attrs=read-write", "host=h sslmode=bogus",
		"postgres://u@h/db?pool_max_conns=0", "pool_min_conns=-1", "a=b c", "%zz",
	} {
		f.Add(s, "Sekret1234pw")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, dsn, password string) {
		for _, full := range []string{
			dsn,
			"postgres://u:" + password + "@127.0.0.1/db?" + dsn,
			dsn + " password=" + password,
			"password=" + password + " " + dsn,
		} {
			s, err := pgstore.Open(ctx, full)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%q) with a cancelled context succeeded", full)
			}
			if secret(password, dsn) && strings.Contains(err.Error(), password) {
				t.Fatalf("Open(%q) = %q: the error quotes the password", full, err)
			}
			if strings.Contains(err.Error(), "cannot be parsed") && !errors.Is(err, store.ErrInvalidConfig) {
				t.Fatalf("Open(%q) = %v: a parse error that does not match ErrInvalidConfig", full, err)
			}
		}
	})
}

// secret reports whether p is recognisable in an error as the password: long
// enough, plain, and not found in the rest of the DSN.
func secret(p, rest string) bool {
	if len(p) < 8 || strings.Contains(rest, p) || strings.Contains("postgres://u:@127.0.0.1/db? password=", p) {
		return false
	}
	for _, c := range p {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum {
			return false
		}
	}
	return true
}

// A DSN that does not parse is quoted in Open's error; its password is not
// (FuzzOpenDSN found "postgres://0 password=00000000" quoted whole).
func TestOpenErrorHidesPassword(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, dsn := range []string{
		"postgres://0 password=Sekret1234pw",
		"postgres://host password=Sekret1234pw dbname=x",
		"host=h password='Sekret 1234pw' port=x",
		"host=h password=Sekret1234pw password=Other5678pw port=x",
		"postgres://u:Sekret1234pw@h:x/db",
		"postgres://u:Sekret1234pw@h/db?sslpassword=Other5678pw&%zz",
		"postgres://u:Sek%20ret1234pw@h/db?port=x",
	} {
		_, err := pgstore.Open(ctx, dsn)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		for _, pw := range []string{"Sekret1234pw", "Sekret 1234pw", "Other5678pw", "Sek%20ret1234pw", "Sek ret1234pw"} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("Open(%q) = %q quotes the password", dsn, err)
			}
		}
	}
}
