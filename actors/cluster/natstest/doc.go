// Package natstest runs real nats-servers with JetStream for tests: on a
// random loopback port, their store in the test's temporary directory,
// deaf to signals and silent. The cluster's tests use a real server, not
// a mock, and every package starting one the same way keeps them alike.
package natstest
