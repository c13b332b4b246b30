package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelSelector is metav1.LabelSelector's JSON (matchLabels,
// matchExpressions) with bounds on its sizes: the CEL rules that check a
// selector against a template's labels (replica sets, pools) must have a
// bounded estimated cost for the API server to accept the CRD. The bounds
// are those of valid labels (a value is at most 63 characters) and
// generous counts.
type LabelSelector struct {
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value.
//
// +kubebuilder:validation:MaxLength=63
type LabelValue string

// LabelSelectorRequirement is one matchExpressions entry.
type LabelSelectorRequirement struct {
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Values []LabelValue `json:"values,omitempty"`
}

// AsSelector converts s to a labels.Selector (nil selects nothing).
func (s *LabelSelector) AsSelector() (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	m := &metav1.LabelSelector{}
	if len(s.MatchLabels) > 0 {
		m.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			m.MatchLabels[k] = string(v)
		}
	}
	for _, e := range s.MatchExpressions {
		r := metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator}
		for _, v := range e.Values {
			r.Values = append(r.Values, string(v))
		}
		m.MatchExpressions = append(m.MatchExpressions, r)
	}
	return metav1.LabelSelectorAsSelector(m)
}
