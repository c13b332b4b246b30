package vmi

import "errors"

// ErrPVCNotFound: a persistentVolumeClaim volume names a claim that does
// not exist (yet); the pod is not rendered until it does.
var ErrPVCNotFound = errors.New("persistent volume claim not found")
