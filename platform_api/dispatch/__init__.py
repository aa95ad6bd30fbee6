"""The dispatch of clients' messages: each message a client writes is claimed once
(`claims`), classified and acted on by the org's agent (`service`), by the background
loop every replica runs (`loop`)."""
