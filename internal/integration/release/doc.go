// Package release has no code: its tests check the repository's release
// (see RELEASING.md) the way a stranger meets it. TestModules checks
// scripts/modules against go.work and every go.mod; TestStranger builds a
// module proxy of the checkout and makes programs outside the repository
// fetch, build and run every released module from it, with no replace.
package release
