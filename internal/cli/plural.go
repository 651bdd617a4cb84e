package cli

import "fmt"

// counted is n and the noun, plural unless n is 1: "1 record", "3
// records", "0 chains". Nouns here take an s.
func counted[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// isAre is the verb for n things: "1 record is", "2 records are".
func isAre[N ~int | ~int64](n N) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// wasWere is the past of isAre.
func wasWere[N ~int | ~int64](n N) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// wereCounted is counted and its verb in the past: "1 record was".
func wereCounted[N ~int | ~int64](n N, noun string) string {
	return counted(n, noun) + " " + wasWere(n)
}
