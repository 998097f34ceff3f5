// The invoice shapes of spec 2.4 and 2.5. Every field is always present; absent objects and scalars are null.
import { Type, type Static } from "typebox";
import { DateTime, ListQuerySchema, Nullable, PaginationSchema, errorResponses } from "./common.schemas.ts";
import { INVOICE_STATUSES, type InvoiceStatus } from "./invoice-statuses.ts";

export { INVOICE_STATUSES, type InvoiceStatus };

export const DiscordAccountSchema = Type.Object({ discordId: Type.String(), email: Type.String() });

const customerInvoiceProperties = {
  id: Type.String(),
  totalInUsd: Type.Number({ description: "US dollars, at most two decimals." }),
  paymentMethod: Type.String(),
  displayedPaymentInfo: Type.String({ description: "Masked payment description." }),
  createdOnSessionId: Type.String(),
  leftFeedback: Type.Boolean(),
  status: Type.String({ enum: [...INVOICE_STATUSES] }),
  createdAt: DateTime,
};

export const CustomerInvoiceSchema = Type.Object(customerInvoiceProperties, { $id: "CustomerInvoice" });

export const InvoiceFieldSchema = Type.Object({ key: Type.String(), value: Type.String(), type: Type.String() });
export const InvoiceItemSchema = Type.Object({
  productVariantId: Type.String(),
  quantity: Type.Integer(),
  price: Type.Number({ description: "Unit price in US dollars." }),
  couponId: Nullable(Type.String()),
});
export const InvoiceLogSchema = Type.Object({ log: Type.String(), type: Type.String(), createdAt: DateTime });

export const InvoiceSchema = Type.Object(
  {
    ...customerInvoiceProperties,
    customerId: Type.String(),
    discordAccount: Nullable(DiscordAccountSchema),
    invoiceFields: Type.Array(InvoiceFieldSchema),
    invoiceItems: Type.Array(InvoiceItemSchema),
    invoiceLogs: Type.Array(InvoiceLogSchema),
  },
  { $id: "Invoice" },
);

export type CustomerInvoice = Static<typeof CustomerInvoiceSchema>;
export type Invoice = Static<typeof InvoiceSchema>;

export const StatusQuerySchema = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: "^[a-z]+(,[a-z]+)*$",
  description: `Invoice status, or several comma-separated (any of them): ${INVOICE_STATUSES.join(", ")}.`,
  examples: ["completed", "pending,expired"],
});

export const ListInvoicesQuerySchema = Type.Object(
  {
    ...ListQuerySchema.properties,
    status: Type.Optional(StatusQuerySchema),
  },
  { additionalProperties: false },
);

export const ListInvoicesSchema = {
  summary: "List a store's invoices",
  description:
    "Newest first (createdAt, then id, descending). `id` matches exactly the invoice's id, customerId, createdOnSessionId, " +
    "discordAccount.discordId, or the productVariantId or couponId of any of its items. `status` keeps the invoices in that status " +
    "(or any of several, comma-separated).",
  tags: ["read"],
  security: [{ apiKey: [] }],
  querystring: ListInvoicesQuerySchema,
  response: {
    200: Type.Object({ data: Type.Object({ invoices: Type.Array(Type.Ref("Invoice")) }), pagination: PaginationSchema }),
    ...errorResponses(400, 401, 403, 429),
  },
};

export const CheckoutBodySchema = Type.Object(
  {
    customerId: Type.String({ minLength: 1 }),
    paymentMethod: Type.String({ minLength: 1, maxLength: 100 }),
    displayedPaymentInfo: Type.Optional(Type.String({ maxLength: 200 })),
    sessionId: Type.Optional(Type.String({ minLength: 1, description: "An existing session of the customer." })),
    session: Type.Optional(
      Type.Object(
        { ip: Type.String({ maxLength: 64 }), userAgent: Type.String({ maxLength: 512 }), country: Type.String({ maxLength: 64 }) },
        { additionalProperties: false, description: "Records a new session of the customer for this checkout." },
      ),
    ),
    items: Type.Array(
      Type.Object(
        {
          productVariantId: Type.String({ minLength: 1, maxLength: 200 }),
          quantity: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
          price: Type.Number({ minimum: 0, maximum: 1e9, description: "Unit price in US dollars, at most two decimals." }),
          couponId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 200 }))),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 500 },
    ),
    fields: Type.Optional(
      Type.Array(
        Type.Object(
          { key: Type.String({ minLength: 1, maxLength: 200 }), value: Type.String({ maxLength: 10_000 }), type: Type.String({ maxLength: 100 }) },
          { additionalProperties: false },
        ),
        { maxItems: 100 },
      ),
    ),
    discordId: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    discordEmail: Type.Optional(Type.String({ maxLength: 320 })),
  },
  { additionalProperties: false },
);
export type CheckoutBody = Static<typeof CheckoutBodySchema>;
