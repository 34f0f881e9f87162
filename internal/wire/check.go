package wire

import (
	"errors"
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// maxCheckDepth bounds the nesting CheckEntries follows in a record.
const maxCheckDepth = 100

// CheckEntries reports whether b is exactly n Forward entries as strict receivers (fluentd,
// fluent-bit, forwardtest) accept them: [EventTime, record], the time ext type 0 of 8 bytes,
// the record a map whose keys are str at every level and whose values hold no extension.
// The error names the first entry that is not.
func CheckEntries(b []byte, n int) error {
	count := 0
	for len(b) > 0 {
		sz, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil || sz != 2 {
			return fmt.Errorf("entry %d is not a 2-element array", count)
		}
		var et EventTime
		if b, err = msgp.ReadExtensionBytes(rest, &et); err != nil {
			return fmt.Errorf("entry %d: time: %w", count, err)
		}
		if msgp.NextType(b) != msgp.MapType {
			return fmt.Errorf("entry %d: record is not a map", count)
		}
		if b, err = checkValue(b, 0); err != nil {
			return fmt.Errorf("entry %d: record: %w", count, err)
		}
		count++
	}
	if count != n {
		return fmt.Errorf("%d entries, option size says %d", count, n)
	}
	return nil
}

func checkValue(b []byte, depth int) ([]byte, error) {
	if depth > maxCheckDepth {
		return nil, errors.New("nested too deep")
	}
	var err error
	switch t := msgp.NextType(b); t {
	case msgp.MapType:
		var sz uint32
		if sz, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, err
		}
		for range sz {
			if _, b, err = msgp.ReadStringZC(b); err != nil {
				return nil, errors.New("map key is not a str")
			}
			if b, err = checkValue(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.ArrayType:
		var sz uint32
		if sz, b, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return nil, err
		}
		for range sz {
			if b, err = checkValue(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.StrType, msgp.BinType, msgp.IntType, msgp.UintType, msgp.Float32Type,
		msgp.Float64Type, msgp.BoolType, msgp.NilType:
		return msgp.Skip(b)
	default:
		return nil, fmt.Errorf("value of msgpack type %s", t)
	}
}
