// Command modproxy writes a Go module proxy of the repository's released
// modules, at the versions of scripts/modules, into a directory (see
// package modproxy): GOPROXY=file://DIR then serves them.
//
//	go run ./internal/integration/cmd/modproxy [-root DIR] OUTDIR
//	go run ./internal/integration/cmd/modproxy [-root DIR] -work
//
// It prints one line per module written: its path, version and tag. With
// -work it prints the go.work made from scripts/modules instead.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sleeplock/sleeplock/internal/integration/modproxy"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	work := flag.Bool("work", false, "print the go.work made from scripts/modules")
	flag.Parse()
	if *work {
		w, err := modproxy.WorkFile(*root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "modproxy:", err)
			os.Exit(1)
		}
		fmt.Print(w)
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: modproxy [-root DIR] OUTDIR")
		os.Exit(2)
	}
	mods, err := modproxy.Build(*root, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	for _, m := range mods {
		fmt.Printf("%s %s %s\n", m.Path, m.Version, m.Tag())
	}
}
