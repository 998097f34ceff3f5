// What a migration is told about the database it runs on. Migrations import nothing from the application
// (a migration is frozen the day it ships): kysely, this type, and older migrations' constants only.
export interface MigrationContext {
  dialect: "sqlite" | "postgres";
}
