package main

import "errors"

func runBench(args []string) error { return errors.New("bench: not built yet") }

func runHidden(cmd string, args []string) (bool, error) { return false, nil }
