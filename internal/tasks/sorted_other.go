//go:build !linux

package tasks

import "os"

func markSorted(string)                 {}
func markSortedAs(string, os.FileInfo)  {}
func knownSorted(string, *os.File) bool { return false }

func unmarkSorted(string) {}
