// Package lockd serves NLM.
package lockd
