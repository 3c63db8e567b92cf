package envvar

import (
	"errors"
	"testing"
)

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

func TestInt(t *testing.T) {
	parse := func(v string) (int64, error) {
		if v == "bad" {
			return 0, errors.New("ENVVAR_TEST_INT must be good")
		}
		return int64(len(v)), nil
	}
	tests := []struct {
		value string
		want  Setting
	}{
		{"", Setting{Name: "ENVVAR_TEST_INT", InEffect: 0}},
		{"abc", Setting{Name: "ENVVAR_TEST_INT", Value: "abc", InEffect: 3}},
		{"bad", Setting{Name: "ENVVAR_TEST_INT", Value: "bad", InEffect: 9,
			Problem: "ENVVAR_TEST_INT must be good; using 9 (nine)"}},
	}
	for _, tc := range tests {
		t.Setenv("ENVVAR_TEST_INT", tc.value)
		if got := Int("ENVVAR_TEST_INT", 9, " (nine)", parse); got != tc.want.InEffect {
			t.Errorf("%q: Int = %d, want %d", tc.value, got, tc.want.InEffect)
		}
		var rec Setting
		for _, s := range All() {
			if s.Name == "ENVVAR_TEST_INT" {
				rec = s
			}
		}
		if rec != tc.want {
			t.Errorf("%q: recorded %+v, want %+v", tc.value, rec, tc.want)
		}
	}
}
