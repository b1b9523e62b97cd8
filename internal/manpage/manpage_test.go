package manpage

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		`-np N`:        `\-np N`,
		`.hidden`:      `\&.hidden`,
		`'quote`:       `\&'quote`,
		`a\b`:          `a\eb`,
		`plain text.`:  `plain text.`,
		`--showme:x y`: `\-\-showme:x y`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("np", 0, "start `N` PEs")
	fs.Duration("timeout", time.Minute, "stop after this `duration`")
	fs.Func("x", "export `VAR[=value]`", func(string) error { return nil })
	fs.Bool("tag-output", false, "tag lines")
	got := map[string]string{}
	for _, o := range Flags(fs) {
		got[o.Name] = o.Text
	}
	want := map[string]string{
		"-np N":              "start N PEs",
		"--timeout DURATION": "stop after this duration (default 1m0s)",
		"-x VAR[=value]":     "export VAR[=value]",
		"--tag-output":       "tag lines",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %q)", k, got[k], v, got)
		}
	}
}

func TestWrite(t *testing.T) {
	p := &Page{Name: "tool", Section: 1, Summary: "does things", Synopsis: []string{"tool -n N"},
		Description: []string{"First.", "\tliteral -x\n\t.dot"},
		Sections:    []Section{{Title: "Options", Options: []Option{{Name: "-n N", Text: "count"}}}},
		SeeAlso:     []string{"shrun(1)", "symcc(1)"}}
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".TH \"TOOL\" 1 \"\"", ".SH NAME\ntool \\- does things\n", ".B \"tool\"\n\\-n N\n",
		".RS\n.nf\nliteral \\-x\n\\&.dot\n.fi\n.RE\n", ".TP\n.B \"\\-n N\"\ncount\n", ".BR \"shrun\" (1),\n.BR \"symcc\" (1)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q:\n%s", want, b.String())
		}
	}
}
