// Package config will hold opsdesk's configuration (contexts, tool catalog)
// read with viper. It arrives with the console issue; until then the
// package is empty on purpose.
package config
