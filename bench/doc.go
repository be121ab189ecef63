// Package bench holds sleeplock's benchmarks and their comparison with
// peers measured in the same run. See README.md in this folder for the
// commands and the figures.
package bench
