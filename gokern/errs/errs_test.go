package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, 0},
		{"value", Value("bad %d", 1), KindValue},
		{"type", Type("bad"), KindType},
		{"memory", Memory("big"), KindMemory},
		{"runtime", Runtime("oops"), KindRuntime},
		{"plain", errors.New("plain"), KindRuntime},
		{"wrapped", fmt.Errorf("ctx: %w", Value("inner")), KindValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.err); got != tc.want {
				t.Fatalf("KindOf(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
	if got := Value("x=%d", 3).Error(); got != "x=3" {
		t.Fatalf("message %q", got)
	}
}
