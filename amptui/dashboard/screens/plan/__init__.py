"""The plan screen: `amptui plan`'s table and its layers x recipes SQNR heat map."""
