// tock-go-reader: reads Tock's topics as any outside Go service would, with no Tock code: franz-go
// consumes the records (read_committed), each value's Schema Registry frame (magic 0, 4-byte schema
// id) names its schema, fetched once per id from the registry's Confluent-compatible REST API, and
// hamba/avro decodes the body with it. It prints one JSON line per record:
// {"topic": ..., "schema_id": ..., "event": "<record name>", "record": {...}}; a record that is not
// in the wire format is printed with "event": null and its first byte.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

type line struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	SchemaID  uint32 `json:"schema_id"`
	Event     any    `json:"event"`
	Record    any    `json:"record"`
	FirstByte int    `json:"first_byte"`
}

type registry struct {
	url     string
	schemas map[uint32]avro.Schema
}

func (r *registry) schema(id uint32) (avro.Schema, error) {
	if known, ok := r.schemas[id]; ok {
		return known, nil
	}
	response, err := http.Get(fmt.Sprintf("%s/schemas/ids/%d", r.url, id))
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		return nil, err
	}
	if response.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("schema id %d: HTTP %d: %s", id, response.StatusCode, body)
	}
	var answer struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	parsed, err := avro.Parse(answer.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", id, err)
	}
	r.schemas[id] = parsed
	return parsed, nil
}

// decode reads a union value: the branch index picks the record schema, whose full name is the event.
func decode(schema avro.Schema, body []byte) (string, any, error) {
	union, ok := schema.(*avro.UnionSchema)
	if !ok {
		return "", nil, fmt.Errorf("the schema is a %s, not a union of events", schema.Type())
	}
	index, size := binary.Varint(body)
	if size <= 0 || index < 0 || int(index) >= len(union.Types()) {
		return "", nil, fmt.Errorf("bad branch index")
	}
	branch := union.Types()[index]
	var record map[string]any
	if err := avro.Unmarshal(branch, body[size:], &record); err != nil {
		return "", nil, err
	}
	named, _ := branch.(avro.NamedSchema)
	if named == nil {
		return "", nil, fmt.Errorf("branch %d is not a named record", index)
	}
	return named.FullName(), plain(branch, record), nil
}

// plain unwraps the {"type name": value} hamba/avro (like Avro's JSON encoding) gives a union's value,
// at every depth, so a record prints as its fields' values.
func plain(schema avro.Schema, value any) any {
	switch typed := schema.(type) {
	case *avro.RecordSchema:
		fields, ok := value.(map[string]any)
		if !ok {
			return value
		}
		for _, field := range typed.Fields() {
			fields[field.Name()] = plain(field.Type(), fields[field.Name()])
		}
		return fields
	case *avro.ArraySchema:
		items, ok := value.([]any)
		if !ok {
			return value
		}
		for i := range items {
			items[i] = plain(typed.Items(), items[i])
		}
		return items
	case *avro.MapSchema:
		entries, ok := value.(map[string]any)
		if !ok {
			return value
		}
		for key := range entries {
			entries[key] = plain(typed.Values(), entries[key])
		}
		return entries
	case *avro.UnionSchema:
		wrapped, ok := value.(map[string]any)
		if !ok || len(wrapped) != 1 {
			return value
		}
		for name, inner := range wrapped {
			for _, branch := range typed.Types() {
				if branchName(branch) == name {
					return plain(branch, inner)
				}
			}
		}
		return value
	case *avro.RefSchema:
		return plain(typed.Schema(), value)
	}
	return value
}

func branchName(schema avro.Schema) string {
	if named, ok := schema.(avro.NamedSchema); ok {
		return named.FullName()
	}
	return string(schema.Type())
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers")
	registryURL := flag.String("registry", "", "the registry's Confluent-compatible API URL")
	topics := flag.String("topics", "", "comma-separated topics, read from their start")
	expect := flag.Int("expect", 0, "stop after this many records")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	flag.Parse()
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumeTopics(strings.Split(*topics, ",")...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tock-go-reader:", err)
		os.Exit(2)
	}
	defer client.Close()
	schemas := &registry{url: strings.TrimRight(*registryURL, "/"), schemas: map[uint32]avro.Schema{}}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	seen := 0
	for seen < *expect {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "tock-go-reader: %d of %d records before the deadline\n", seen, *expect)
			os.Exit(1)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fmt.Fprintf(os.Stderr, "tock-go-reader: %s[%d]: %v\n", topic, partition, err)
		})
		var failure error
		fetches.EachRecord(func(record *kgo.Record) {
			seen++
			found := line{Topic: record.Topic, Partition: record.Partition, Offset: record.Offset}
			if len(record.Value) > 0 {
				found.FirstByte = int(record.Value[0])
			}
			if len(record.Value) >= 5 && record.Value[0] == 0 {
				found.SchemaID = binary.BigEndian.Uint32(record.Value[1:5])
				schema, err := schemas.schema(found.SchemaID)
				if err == nil {
					found.Event, found.Record, err = decode(schema, record.Value[5:])
				}
				if err != nil && failure == nil {
					failure = fmt.Errorf("%s[%d]@%d: %w", record.Topic, record.Partition, record.Offset, err)
				}
			}
			if err := out.Encode(found); err != nil && failure == nil {
				failure = err
			}
		})
		if failure != nil {
			fmt.Fprintln(os.Stderr, "tock-go-reader:", failure)
			os.Exit(1)
		}
	}
}
