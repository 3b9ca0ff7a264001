package sqs

import (
	"context"
	"maps"
	"unicode/utf8"
)

// Tags are kept in the queue table (meta.go), at most maxTags a queue.
const (
	maxTags     = 50
	maxTagKey   = 128
	maxTagValue = 256
)

// checkTags checks tags to be set.
func checkTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return errInvalidParameter("Too many tags: a queue has at most %d.", maxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > maxTagKey || !utf8.ValidString(k) {
			return errInvalidParameter("Tag keys must be 1 to %d characters.", maxTagKey)
		}
		if len(v) > maxTagValue || !utf8.ValidString(v) {
			return errInvalidParameter("Tag values must be at most %d characters.", maxTagValue)
		}
	}
	return nil
}

type tagQueueInput struct {
	QueueUrl string //nolint:revive // the wire name
	Tags     map[string]string
}

func (h *Handler) tagQueue(ctx context.Context, _ *request, in *tagQueueInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, errMissing("Tags")
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	_, err = h.meta.update(ctx, qs.name, func(cur *queueMeta) (*queueMeta, error) {
		if cur == nil {
			cur = qs.meta.clone()
		}
		tags := maps.Clone(cur.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		maps.Copy(tags, in.Tags)
		if err := checkTags(tags); err != nil {
			return nil, err
		}
		cur.Tags = tags
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return &empty{}, nil
}

type untagQueueInput struct {
	QueueUrl string   //nolint:revive // the wire name
	TagKeys  []string //nolint:revive // the wire name
}

func (h *Handler) untagQueue(ctx context.Context, _ *request, in *untagQueueInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, errMissing("TagKeys")
	}
	_, err = h.meta.update(ctx, qs.name, func(cur *queueMeta) (*queueMeta, error) {
		if cur == nil {
			cur = qs.meta.clone()
		}
		for _, k := range in.TagKeys {
			delete(cur.Tags, k)
		}
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return &empty{}, nil
}

type tagsOutput struct {
	Tags map[string]string `json:",omitempty"`
}

func (h *Handler) listQueueTags(ctx context.Context, _ *request, in *queueURLInput) (*tagsOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &tagsOutput{Tags: qs.meta.Tags}, nil
}
