package main

import (
	"errors"
	"regexp"
)

var (
	// urlUserinfo matches "scheme://" up to the last "@" of the same
	// word: a URL's user name and password, even in a URL that does not
	// parse (a password holding "@" fools the drivers' own redaction).
	urlUserinfo = regexp.MustCompile("([A-Za-z][A-Za-z0-9+.-]*://)[^\\s\"'`]*@")
	// passwordParam matches a password given as a DSN parameter.
	passwordParam = regexp.MustCompile("(?i)(\\bpassword=)[^\\s&\"'`]*")
)

// redactSecrets hides the user information of every URL in s, and
// password= parameters, so database and Redis URLs can be shown.
func redactSecrets(s string) string {
	s = urlUserinfo.ReplaceAllString(s, "${1}xxxxx@")
	return passwordParam.ReplaceAllString(s, "${1}xxxxx")
}

// redactErr returns err with redactSecrets applied to its message, or err
// itself when there is nothing to hide. Errors about a DSN quote it: the
// drivers redact the password, but not every malformed URL's.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := redactSecrets(msg); red != msg {
		return errors.New(red)
	}
	return err
}
