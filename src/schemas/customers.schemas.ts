// The customer shapes of spec 2.1–2.3. Order figures are derived from the customer's completed invoices.
import { Type, type Static } from "typebox";
import { DateTime, ListQuerySchema, Nullable, PaginationSchema, errorResponses } from "./common.schemas.ts";
import { DiscordAccountSchema, StatusQuerySchema } from "./invoices.schemas.ts";

export const ReviewSchema = Type.Object({
  id: Type.String(),
  rating: Type.Number(),
  text: Type.String(),
  productId: Type.String(),
  createdAt: DateTime,
});

export const CustomerSessionSchema = Type.Object({
  ip: Type.String(),
  userAgent: Type.String(),
  country: Type.String(),
  lastUsedAt: DateTime,
  createdAt: DateTime,
});

export const CustomerSchema = Type.Object(
  {
    id: Type.String(),
    totalOrders: Type.Integer({ description: "Completed invoices." }),
    lastOrderDate: Nullable(DateTime),
    firstOrderDate: Nullable(DateTime),
    totalSpent: Type.Number({ description: "US dollars over completed invoices." }),
    email: Type.String(),
    createdAt: DateTime,
    storeCustomerDiscordAccount: Nullable(DiscordAccountSchema),
    reviews: Type.Array(ReviewSchema),
    customerSessions: Type.Array(CustomerSessionSchema),
    invoices: Type.Array(Type.Ref("CustomerInvoice")),
  },
  { $id: "Customer" },
);

export type Customer = Static<typeof CustomerSchema>;

export const ListCustomersQuerySchema = Type.Object(
  {
    ...ListQuerySchema.properties,
    status: Type.Optional(
      Type.String({
        ...StatusQuerySchema,
        description: "Customers with at least one invoice in this status (or in any of several, comma-separated).",
      }),
    ),
    email: Type.Optional(
      Type.String({ minLength: 1, maxLength: 320, description: "Exact e-mail, case-insensitive (ASCII letters).", examples: ["alice@example.com"] }),
    ),
  },
  { additionalProperties: false },
);

export const ListCustomersSchema = {
  summary: "List a store's customers",
  description:
    "Newest first (createdAt, then id, descending). `id` matches exactly the customer's id, its chat account's discordId, " +
    "the id of any of its invoices, the productId of any of its reviews, or the productVariantId or couponId of any item of its invoices. " +
    "`status` keeps customers with at least one invoice in that status; `email` matches the e-mail exactly, ignoring case.",
  tags: ["read"],
  security: [{ apiKey: [] }],
  querystring: ListCustomersQuerySchema,
  response: {
    200: Type.Object({ data: Type.Object({ customers: Type.Array(Type.Ref("Customer")) }), pagination: PaginationSchema }),
    ...errorResponses(400, 401, 403, 429),
  },
};

export const CreateCustomerBodySchema = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320, pattern: "^[^@\\s]+@[^@\\s]+$" }),
    discordId: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    discordEmail: Type.Optional(Type.String({ maxLength: 320 })),
  },
  { additionalProperties: false },
);
export type CreateCustomerBody = Static<typeof CreateCustomerBodySchema>;
