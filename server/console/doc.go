// Package console is the operator console of commandbus: server-rendered pages over a client
// and its orchestration runtime for the troubleshooting queues, the dead-letter queue,
// executions, definitions and their DAGs, with a live overview. Operators sign in with a token;
// viewers read, operators also act, and every action asks for a reason and is audited with the
// token's subject. Pages read completely without JavaScript.
//
// The server package mounts it beside the REST API and lets extensions add pages through
// server.Mount. Served on its own:
//
//	c, err := console.New(console.Options{Client: client, Runtime: rt, Tokens: tokens})
//	if err != nil { ... }
//	mux := http.NewServeMux()
//	c.Register(mux)
//	if err := c.Start(); err != nil { ... }
//	defer c.Close()
//	http.ListenAndServe(addr, mux)
//
// An application tells the console its business context through Hooks and adds its own pages
// with AddTemplates and the Viewer, Operator and Live guards.
package console
