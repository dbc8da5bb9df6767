package hclkit

import "github.com/agext/levenshtein"

// Suggest returns the candidate closest to given (by Levenshtein
// distance) when it is at most maxDistance edits away, for a "Did you
// mean ...?" hint; "" when none is that close. The first of equally close
// candidates wins.
func Suggest(given string, candidates []string, maxDistance int) string {
	best, bestDist := "", maxDistance+1
	for _, c := range candidates {
		if d := levenshtein.Distance(given, c, nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
