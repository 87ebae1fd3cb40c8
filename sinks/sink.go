// Package sinks stores compressed snapshots (local disk or S3) under one
// object layout: <prefix>/<run>/<variable>/<step>.fz.
package sinks
