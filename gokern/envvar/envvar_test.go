package envvar

import "testing"

func TestRecordAll(t *testing.T) {
	tests := []Setting{
		{Name: "B_TEST", Value: "abc", InEffect: 2, Problem: "must be an integer"},
		{Name: "A_TEST", Value: "", InEffect: 7},
		{Name: "B_TEST", Value: "3", InEffect: 3}, // replaces the first
	}
	for _, s := range tests {
		Record(s)
	}
	var got []Setting
	for _, s := range All() {
		if s.Name == "A_TEST" || s.Name == "B_TEST" {
			got = append(got, s)
		}
	}
	if len(got) != 2 || got[0] != tests[1] || got[1] != tests[2] {
		t.Fatalf("All() = %+v, want %+v then %+v", got, tests[1], tests[2])
	}
}
