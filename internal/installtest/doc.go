// Package installtest holds the tests of make install: symheap installed
// into a temporary prefix and used from there as a C user would, with a
// PATH and an environment that leave the build tree out: symcc, symc++
// and shrun build and run programs, pkg-config gives the flags, man
// renders the pages, configure CC=symcc completes, and make uninstall
// takes it all away. The package has no code; the tests are the point.
package installtest
