package serveopts

import (
	"fmt"
	"strings"
)

// Parse applies the comma-separated option list on top of o, as a further
// -o does: a later option overrides an earlier one, but each clients= adds
// to the list. Empty items are ignored and whitespace around items is
// trimmed. The error for a bad item names it and says what is allowed;
// the one for an unknown option lists the known ones.
func Parse(list string, o *Options) error {
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, hasVal := strings.Cut(item, "=")
		opt := byName[name]
		var msg string
		switch {
		case opt == nil:
			return fmt.Errorf("unknown serve option %q (%s)", item, strings.Join(names(), ", "))
		case !opt.value && hasVal:
			msg = "takes no value"
		case opt.value && !hasVal:
			msg = "must be " + opt.allowed
		default:
			msg = opt.apply(o, name, val)
		}
		if msg != "" {
			return fmt.Errorf("option %s: %s", item, msg)
		}
	}
	return nil
}
