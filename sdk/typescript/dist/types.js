// Wire types of Berth's HTTP API, as internal/apitype defines them. Field
// names are the JSON names; times are RFC 3339 UTC strings. Keep this file
// in step with internal/apitype: it is the SDK's whole view of the wire.
export {};
