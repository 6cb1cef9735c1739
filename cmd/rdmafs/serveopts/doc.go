package serveopts

import "github.com/rdmafs/rdmafs/mountopts"

// A Section is a group of options as rdmafs -h and the man page show
// them: a title ("" for the first, which the command's text introduces)
// and its items.
type Section struct {
	Title string
	Items []Item
}

// An Item documents one option: how it is written, and what it does
// followed by its values and default.
type Item struct{ Syntax, Help string }

// Sections documents every option from the table, in its order.
func Sections() []Section {
	secs := make([]Section, numSections)
	for s := range numSections {
		secs[s].Title = s.title()
	}
	for i := range table {
		opt := &table[i]
		help := opt.help
		if notes := mountopts.ValueNotes(opt.values, opt.def); notes != "" {
			help += " (" + notes + ")"
		}
		secs[opt.section].Items = append(secs[opt.section].Items, Item{Syntax: opt.syntax, Help: help})
	}
	return secs
}
