// The Linux function app that runs the stormgate custom handler on Flex Consumption (FC1), its hosting plan, and
// every app setting the handler and the Functions host read. Flex Consumption takes the runtime from
// functionAppConfig (it refuses FUNCTIONS_WORKER_RUNTIME and FUNCTIONS_EXTENSION_VERSION as app settings), deploys
// from a blob container with the app's managed identity, and scales each non-HTTP function on its own.

import { tierDeployments } from 'openai.bicep'

@description('Azure region for the plan and the app.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Hosting plan name.')
param planName string

@description('Function app name (also the default host name prefix).')
param appName string

@description('Most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int

@description('Memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int

@description('Instances kept always ready for the classify function.')
@minValue(1)
param classifyAlwaysReady int

@description('Subnet (delegated to Microsoft.App/environments) the app integrates with; empty for none.')
param appSubnetId string

@description('User-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity.')
param identityClientId string

@description('Object (principal) id of that identity.')
param identityPrincipalId string

@description('Functions host storage account name.')
param storageAccountName string

@description('Blob container URL for the Flex Consumption deployment package.')
param deploymentContainerUrl string

@description('Application Insights connection string.')
@secure()
param appInsightsConnectionString string

@description('Azure OpenAI endpoint, e.g. https://<account>.openai.azure.com/.')
param openAiEndpoint string

@description('Azure OpenAI data-plane API version the handler calls.')
param openAiApiVersion string

@description('Model deployments per tier, the same object the Azure OpenAI module deploys from.')
param modelDeployments tierDeployments

@description('Fraction of each deployment budget the governor keeps in reserve.')
param governorHeadroom string

@description('Tier of each summary kind at each routing severity (STORMGATE_TIER_TABLE).')
param tierTable string

@description('Redis URL when Azure Managed Redis is deployed; empty when an existing Redis is used.')
param managedRedisUrl string

@description('How the handler signs in to an existing Redis: url (credentials in the URL) or entra.')
@allowed([
  'url'
  'entra'
])
param existingRedisAuth string

@description('Key Vault base URL, for settings of the form keyvault:<secret-name>.')
param keyVaultUri string

@description('Key Vault references to the stored secrets.')
param vaultReferences object

@description('Kafka bootstrap servers, host:port[,host:port].')
param kafkaBrokers string

@description('Topic carrying ServiceNow incident events.')
param kafkaTopic string

@description('Consumer group of the classify trigger.')
param kafkaConsumerGroup string

@description('SASL user name for Kafka.')
param kafkaUsername string

@description('Topic for customer notifications.')
param kafkaNotificationsTopic string

@description('ServiceNow instance URL, e.g. https://example.service-now.com; empty turns work-note write-back off.')
param serviceNowInstanceUrl string

@description('ServiceNow integration user name.')
param serviceNowUsername string

@description('Azure AI Search endpoint; empty turns search enrichment off.')
param searchEndpoint string

@description('Azure AI Search index name.')
param searchIndex string

@description('RUST_LOG filter for the handler.')
param rustLog string

var useManagedRedis = !empty(managedRedisUrl)

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    keyVaultReferenceIdentity: identityId
    virtualNetworkSubnetId: empty(appSubnetId) ? null : appSubnetId
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
        // Flex Consumption scales each non-HTTP function on its own; classify scaling out from zero waits on
        // the scale controller reading Kafka lag with the Key Vault-referenced password. A warm instance keeps
        // consuming whatever that path does ('function:<name>' names one function; Microsoft Learn,
        // "Flex Consumption plan", always ready instances).
        alwaysReady: [
          {
            name: 'function:classify'
            instanceCount: classifyAlwaysReady
          }
        ]
      }
      runtime: {
        name: 'custom'
        version: '1.0'
      }
    }
    siteConfig: {
      minTlsVersion: '1.2'
    }
  }
}

// Settings every deployment writes. The handler validates them at start-up.
var coreSettings = {
  AzureWebJobsStorage__accountName: storageAccountName
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  APPLICATIONINSIGHTS_CONNECTION_STRING: appInsightsConnectionString
  // Telemetry signs in as the app identity: Application Insights has local authentication off.
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  AZURE_CLIENT_ID: identityClientId
  AZURE_OPENAI_ENDPOINT: openAiEndpoint
  AZURE_OPENAI_API_VERSION: openAiApiVersion
  AZURE_OPENAI_AUTH: 'managed_identity'
  // Deployment names, models, budgets and prices come from the same object the Azure OpenAI module deploys, so
  // the governor's tokens per minute always equal the deployment capacity (1 unit = 1,000 TPM) and its requests
  // per minute the capacity times the model's requests per unit.
  STORMGATE_PREMIUM_DEPLOYMENT: modelDeployments.premium.name
  STORMGATE_PREMIUM_MODEL: modelDeployments.premium.model
  STORMGATE_PREMIUM_TPM: string(modelDeployments.premium.capacity * 1000)
  STORMGATE_PREMIUM_RPM: string(modelDeployments.premium.capacity * modelDeployments.premium.rpmPerUnit)
  STORMGATE_PREMIUM_PRICE_INPUT_PER_1M: modelDeployments.premium.priceInputPer1M
  STORMGATE_PREMIUM_PRICE_OUTPUT_PER_1M: modelDeployments.premium.priceOutputPer1M
  STORMGATE_STANDARD_DEPLOYMENT: modelDeployments.standard.name
  STORMGATE_STANDARD_MODEL: modelDeployments.standard.model
  STORMGATE_STANDARD_TPM: string(modelDeployments.standard.capacity * 1000)
  STORMGATE_STANDARD_RPM: string(modelDeployments.standard.capacity * modelDeployments.standard.rpmPerUnit)
  STORMGATE_STANDARD_PRICE_INPUT_PER_1M: modelDeployments.standard.priceInputPer1M
  STORMGATE_STANDARD_PRICE_OUTPUT_PER_1M: modelDeployments.standard.priceOutputPer1M
  STORMGATE_GOVERNOR_HEADROOM: governorHeadroom
  STORMGATE_TIER_TABLE: tierTable
  STORMGATE_REDIS_URL: useManagedRedis ? managedRedisUrl : vaultReferences.existingRedisUrl
  STORMGATE_REDIS_AUTH: useManagedRedis ? 'entra' : existingRedisAuth
  STORMGATE_KEY_VAULT_URL: keyVaultUri
  STORMGATE_LOG_FORMAT: 'json'
  // What Redis keeps (it runs with noeviction): tickets 14 days after their last update, at most 5,000 dead
  // letters. docs/operations.md, *Redis memory*, sizes Redis for these values.
  STORMGATE_RETENTION_DAYS: '14'
  STORMGATE_DEAD_LETTER_MAX: '5000'
  RUST_LOG: rustLog
  KAFKA_BROKERS: kafkaBrokers
  KAFKA_TOPIC: kafkaTopic
  KAFKA_CONSUMER_GROUP: kafkaConsumerGroup
  KAFKA_USERNAME: kafkaUsername
  KAFKA_PASSWORD: vaultReferences.kafkaPassword
  KAFKA_NOTIFICATIONS_TOPIC: kafkaNotificationsTopic
}

// Entra sign-in to Redis names the identity's object id as the Redis user.
var redisUserSettings = useManagedRedis || existingRedisAuth == 'entra'
  ? {
      STORMGATE_REDIS_USER: identityPrincipalId
    }
  : {}

var serviceNowSettings = empty(serviceNowInstanceUrl)
  ? {}
  : {
      SERVICENOW_INSTANCE_URL: serviceNowInstanceUrl
      SERVICENOW_USERNAME: serviceNowUsername
      SERVICENOW_PASSWORD: vaultReferences.serviceNowPassword
    }

var searchSettings = empty(searchEndpoint)
  ? {}
  : {
      STORMGATE_SEARCH_ENDPOINT: searchEndpoint
      STORMGATE_SEARCH_INDEX: searchIndex
      STORMGATE_SEARCH_API_KEY: vaultReferences.searchApiKey
    }

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: app
  name: 'appsettings'
  properties: union(coreSettings, redisUserSettings, serviceNowSettings, searchSettings)
}

output name string = app.name
output defaultHostName string = app.properties.defaultHostName
