package server

import "errors"

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("server: invalid config")

// ErrUnhealthy is wrapped by HealthCheck when the server answers but not 200.
var ErrUnhealthy = errors.New("server: unhealthy")
